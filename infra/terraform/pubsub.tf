# Topics and pull subscriptions. Names are the defaults of obsingest.settings.BusSettings and of
# `obsingest summarize --streaming`, so the code runs here without renaming anything.
#
# Every dead-letter topic has a subscription that keeps what lands there (a topic without one
# drops messages): the dead letters wait there for `obsingest redrive` or an operator.

locals {
  # topic -> message retention on the topic itself (lets a subscriber created later seek back);
  # null: none. The event topics downstream consumers read keep a week.
  topics = {
    "ccd-objects"            = null
    "ccd-objects-dlq"        = null
    "ccd-objects-dlq-parked" = null
    "ccd-arrivals"           = "604800s"
    "exposures"              = "604800s"
    "exposures-dlq"          = null
    "exposures-ingested"     = "604800s"
    "exposure-summaries"     = "604800s"
    "budget-alerts"          = "604800s"
    "exposure-events-dlq"    = null
  }
  week = "604800s"
}

resource "google_pubsub_topic" "topic" {
  for_each                   = local.topics
  name                       = each.key
  message_retention_duration = each.value

  #checkov:skip=CKV_GCP_83:Google-managed encryption at rest. Messages are notifications and event metadata (no pixels, no personal data); a customer-managed key would add a KMS dependency, and its outage mode, to the 5-second path for no threat it answers here.

  depends_on = [google_project_service.api]
}

# Dead letters of the register push subscription, kept for redrive (name as `obsingest setup`).
resource "google_pubsub_subscription" "objects_dlq_hold" {
  name                       = "ccd-objects-dlq-hold"
  topic                      = google_pubsub_topic.topic["ccd-objects-dlq"].id
  ack_deadline_seconds       = 60
  message_retention_duration = local.week
  retain_acked_messages      = false

  expiration_policy {
    ttl = ""
  }
}

# Undecodable inputs of the Beam job, kept for inspection.
resource "google_pubsub_subscription" "events_dlq_hold" {
  name                       = "exposure-events-dlq-hold"
  topic                      = google_pubsub_topic.topic["exposure-events-dlq"].id
  ack_deadline_seconds       = 60
  message_retention_duration = local.week

  expiration_policy {
    ttl = ""
  }
}

# Dead letters given up after their last redrive, kept with their history for an operator.
resource "google_pubsub_subscription" "objects_dlq_parked_hold" {
  name                       = "ccd-objects-dlq-parked-hold"
  topic                      = google_pubsub_topic.topic["ccd-objects-dlq-parked"].id
  ack_deadline_seconds       = 60
  message_retention_duration = local.week

  expiration_policy {
    ttl = ""
  }
}

# The Beam streaming job's inputs (names as `obsingest summarize --streaming` defaults).
resource "google_pubsub_subscription" "beam" {
  for_each                   = { "ccd-arrivals-beam" = "ccd-arrivals", "exposures-beam" = "exposures" }
  name                       = each.key
  topic                      = google_pubsub_topic.topic[each.value].id
  ack_deadline_seconds       = 60
  message_retention_duration = local.week

  expiration_policy {
    ttl = ""
  }
}
