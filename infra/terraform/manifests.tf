# The manifests function's own pieces: its grant and the hold of its dead letters. The function
# (the register function's source archive deployed a second time with entry point
# `on_manifest`) and its push subscription on `exposures` are `push["manifests"]` in
# push_functions.tf.
#
# It records each ExposureManifest in the registry once (the basis of completeness), then checks
# the exposure: CCDs registered before their manifest complete it there, and its one
# ExposureIngested goes to `exposures-ingested` (functions/register/README.md). Replies as the
# register function's: 2xx = done (recorded, already recorded, or quarantined with its reason),
# 503 = retriable. What still fails after max_delivery_attempts goes to `exposures-dlq`, kept by
# `exposures-dlq-hold` for an operator (a manifest is small and rare: no redrive job; re-publish
# it to `exposures` by hand, recording is idempotent).
#
# Its own identity, not the register function's: it reads no object, and publishes only
# ExposureIngested.

resource "google_pubsub_topic_iam_member" "manifests_publishes" {
  topic  = google_pubsub_topic.topic["exposures-ingested"].id
  role   = "roles/pubsub.publisher"
  member = google_service_account.piece["manifests"].member
}

# Manifests the function could not take after every attempt, kept for an operator.
resource "google_pubsub_subscription" "exposures_dlq_hold" {
  name                       = "exposures-dlq-hold"
  topic                      = google_pubsub_topic.topic["exposures-dlq"].id
  ack_deadline_seconds       = 60
  message_retention_duration = local.week

  expiration_policy {
    ttl = ""
  }
}
