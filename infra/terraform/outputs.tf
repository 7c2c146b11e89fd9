output "register_url" {
  description = "Push endpoint of the register function (also the OIDC audience)."
  value       = google_cloudfunctions2_function.register.service_config[0].uri
}

output "bucket" {
  value = google_storage_bucket.raw.name
}

output "arrivals_topic" {
  value = google_pubsub_topic.topic["ccd-arrivals"].id
}
