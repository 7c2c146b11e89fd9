"""Infrastructure: the local service stack (``infra.local``), Cloud Functions packaging
(``infra/gcf``) and Terraform for GCP (``infra/terraform``)."""
