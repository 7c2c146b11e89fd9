"""The `obsingest` command line: one module per subcommand group, wired in `main`."""
