"""One contract test suite per interface, run on every backend (as daf_butler's RegistryTests runs
on SQLite and PostgreSQL). Each module holds a mixin class named ``...Contract`` (not collected
by itself); every backend's test module subclasses it as ``Test...`` and provides the fixture the
contract asks for. Unit-tier backends (SQLite, local directory, in-memory bus) run in seconds;
service backends run in the integration tier against the real local stack."""
