# The edge runs on observatory hosts and is not deployed here, but what it may do in this project
# is: create CCDs under raw/ and quarantine/ (and stat them on a create-once 412), and publish
# ExposureManifests on `exposures`. No key is created: bind the observatory's workload identity
# federation (or an operator-held key) to obsingest-edge outside this configuration.

resource "google_storage_bucket_iam_member" "edge_uploads" {
  for_each = toset(["roles/storage.objectCreator", "roles/storage.objectViewer"])
  bucket   = google_storage_bucket.raw.name
  role     = each.value
  member   = google_service_account.piece["edge"].member

  condition {
    title      = "ccd-objects"
    expression = local.ccd_prefixes
  }
}

resource "google_pubsub_topic_iam_member" "edge_publishes_manifests" {
  topic  = google_pubsub_topic.topic["exposures"].id
  role   = "roles/pubsub.publisher"
  member = google_service_account.piece["edge"].member
}
