"""Tests on containers only (marker ``containers``, run by ``make test-containers``)."""
