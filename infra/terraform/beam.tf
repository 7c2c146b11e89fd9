# The Beam streaming job (exposure summaries) on Dataflow: its subscriptions and topics
# (pubsub.tf), its worker identity and grants, and its staging bucket (storage.tf). The job is
# launched, not declared: `terraform output -raw beam_launch_command` prints the exact command
# (`obsingest summarize --streaming ... -- --runner=DataflowRunner ...`) for these resources.
# A google_dataflow_flex_template_job would need a template spec built with gcloud first; the
# launch command keeps one path (the same CLI as on the laptop) and is re-run to update the job
# (`--update` keeps its state).

resource "google_pubsub_subscription_iam_member" "beam_reads" {
  for_each = {
    for pair in setproduct(keys(google_pubsub_subscription.beam), ["roles/pubsub.subscriber", "roles/pubsub.viewer"]) :
    "${pair[0]} ${pair[1]}" => { subscription = pair[0], role = pair[1] }
  }
  subscription = google_pubsub_subscription.beam[each.value.subscription].id
  role         = each.value.role
  member       = google_service_account.piece["beam"].member
}

resource "google_pubsub_topic_iam_member" "beam_publishes" {
  for_each = toset(["exposure-summaries", "budget-alerts", "exposure-events-dlq"])
  topic    = google_pubsub_topic.topic[each.value].id
  role     = "roles/pubsub.publisher"
  member   = google_service_account.piece["beam"].member
}

resource "google_storage_bucket_iam_member" "beam_stages" {
  bucket = google_storage_bucket.dataflow.name
  role   = "roles/storage.objectAdmin"
  member = google_service_account.piece["beam"].member
}

locals {
  beam_launch_command = join(" ", [
    "obsingest summarize --streaming --project ${var.project}",
    "--arrivals-subscription ${google_pubsub_subscription.beam["ccd-arrivals-beam"].name}",
    "--manifests-subscription ${google_pubsub_subscription.beam["exposures-beam"].name}",
    "--summaries-topic ${google_pubsub_topic.topic["exposure-summaries"].name}",
    "--alerts-topic ${google_pubsub_topic.topic["budget-alerts"].name}",
    "--dead-letter-topic ${google_pubsub_topic.topic["exposure-events-dlq"].name}",
    "-- --runner=DataflowRunner --project=${var.project} --region=${var.region}",
    "--job_name=obsingest-exposure-summaries --streaming --enable_streaming_engine",
    "--service_account_email=${google_service_account.piece["beam"].email}",
    "--temp_location=gs://${google_storage_bucket.dataflow.name}/tmp",
    "--staging_location=gs://${google_storage_bucket.dataflow.name}/staging",
    "--subnetwork=regions/${var.region}/subnetworks/${google_compute_subnetwork.workloads.name}",
    "--no_use_public_ips",
    "--sdk_container_image=${var.images.beam}",
  ])
}
