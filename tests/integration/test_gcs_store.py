"""GcsStore on the GCS emulator (fake-gcs-server) under the ObjectStore contract."""

from __future__ import annotations

import pytest

from obsingest.store.gcs import GcsSettings, GcsStore
from tests.contracts.object_store import ObjectStoreContract
from tests.integration.fixtures.handles import GcsService

pytestmark = pytest.mark.integration


class TestGcsStoreContract(ObjectStoreContract):
    @pytest.fixture
    def store(self, gcs: GcsService) -> GcsStore:
        bucket = gcs.new_bucket("contract")
        return GcsStore(bucket, settings=GcsSettings(project=gcs.project_id))
