# The raw bucket and its OBJECT_FINALIZE notifications (what `obsingest setup` creates on the
# emulators), and the Dataflow staging bucket.
#
# Raw data cannot be re-observed, so the bucket guards against deletion, not against overwrite:
# every writer stores create-once (ifGenerationMatch=0), so an object is never replaced in normal
# operation. Versioning keeps a deleted (or, by mistake, replaced) CCD as a noncurrent version for
# noncurrent_version_days, on top of soft delete's 7 days. A retention policy was not chosen: GCS
# does not combine it with versioning, an unlocked one can be removed by the same admin who could
# delete, and a locked one is irreversible and would also pin canaries and quarantined bytes that
# operations must be able to delete. The archive of record is the data facility's long-term copy.

resource "google_storage_bucket" "raw" {
  name                        = var.bucket
  location                    = var.region
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false

  #checkov:skip=CKV_GCP_62:Object access is recorded by Cloud Audit Logs (Data Access logs for storage.googleapis.com), the current mechanism; legacy usage-log buckets add a second bucket to secure and add nothing per object.

  versioning {
    enabled = true
  }

  soft_delete_policy {
    retention_duration_seconds = 604800
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_days
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  # Canary objects only prove that notifications flow; a day later they are noise.
  lifecycle_rule {
    condition {
      age            = 1
      matches_prefix = ["canary/"]
      with_state     = "LIVE"
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.api]
}

# GCS publishes notifications as its own service agent.
data "google_storage_project_service_account" "gcs" {}

resource "google_pubsub_topic_iam_member" "gcs_publishes_objects" {
  topic  = google_pubsub_topic.topic["ccd-objects"].id
  role   = "roles/pubsub.publisher"
  member = "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}"
}

# raw/ and quarantine/ go to the register function; canary/ goes the same way (same topic, same
# subscription, same function), so a canary seen proves the CCDs' whole path.
resource "google_storage_notification" "finalize" {
  for_each           = toset(["raw/", "quarantine/", "canary/"])
  bucket             = google_storage_bucket.raw.name
  payload_format     = "JSON_API_V1"
  topic              = google_pubsub_topic.topic["ccd-objects"].id
  event_types        = ["OBJECT_FINALIZE"]
  object_name_prefix = each.value
  depends_on         = [google_pubsub_topic_iam_member.gcs_publishes_objects]
}

# Dataflow staging and temp files of the streaming job: scratch, expired after a week.
resource "google_storage_bucket" "dataflow" {
  name                        = "${var.project}-obsingest-dataflow"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true

  #checkov:skip=CKV_GCP_62:Scratch bucket of Dataflow staging/temp files written only by the job's own service account; Cloud Audit Logs cover access.
  #checkov:skip=CKV_GCP_78:Staging and temp files are regenerated on every launch; versions of scratch files protect nothing.

  lifecycle_rule {
    condition {
      age = 7
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.api]
}
