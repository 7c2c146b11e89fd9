"""The local service stack (``stack``), the emulator push relay (``relay``) and provisioning
(``provision``). Imports the kernel (``obsingest``) only: never a deployment unit or the CLI."""
