"""The local service stack: launchers of the real services (``stack``), the emulator push relay
(``relay``) and provisioning of topics, subscriptions, buckets and databases (``provision``).

Imports the kernel (``obsingest``) only: never a deployment unit or the CLI.
"""
