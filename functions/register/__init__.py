"""Register-on-finalize: object stored -> dataset registered -> ArrivalEvent published."""
