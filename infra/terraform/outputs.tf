output "register_url" {
  description = "Push endpoint of the register function."
  value       = google_cloudfunctions2_function.push["register"].service_config[0].uri
}

output "manifests_url" {
  description = "Push endpoint of the manifests function (on_manifest)."
  value       = google_cloudfunctions2_function.push["manifests"].service_config[0].uri
}

output "presence_url" {
  description = "Presence API base URL (internal ingress, IAM-authenticated)."
  value       = google_cloud_run_v2_service.presence.uri
}

output "bucket" {
  value = google_storage_bucket.raw.name
}

output "topics" {
  description = "Topic name -> full id."
  value       = { for name, topic in google_pubsub_topic.topic : name => topic.id }
}

output "service_accounts" {
  description = "Piece -> service account email."
  value       = { for piece, account in google_service_account.piece : piece => account.email }
}

output "registry_private_ip" {
  value = google_sql_database_instance.registry.private_ip_address
}

output "registry_url_secrets" {
  description = "Secret ids to add the registry URL versions to (README: bootstrap)."
  value       = { for name, secret in google_secret_manager_secret.registry_url : name => secret.id }
}

output "beam_launch_command" {
  description = "Launches (or with --update, updates) the streaming summaries job on Dataflow."
  value       = local.beam_launch_command
}
