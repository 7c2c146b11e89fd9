variable "project" {
  description = "GCP project that hosts the data-facility side of obsingest."
  type        = string
}

variable "region" {
  description = "Region of the bucket, the function and the Pub/Sub push endpoint."
  type        = string
  default     = "us-central1"
}

variable "bucket" {
  description = "Bucket the edge uploads raw CCDs to (raw/...) and parks refused bytes in (quarantine/...)."
  type        = string
}

variable "function_source_bucket" {
  description = "Bucket holding the zipped function source (`make function-zip` output uploaded there)."
  type        = string
}

variable "function_source_object" {
  description = "Object name of the zipped function source in function_source_bucket."
  type        = string
}

variable "registry_url_secret" {
  description = "Secret Manager secret id whose latest version is the PostgreSQL SQLAlchemy URL of the registry."
  type        = string
}

variable "max_instances" {
  description = "Upper bound on function instances. With registry_pool_size this bounds DB connections: keep max_instances * registry_pool_size below the server's max_connections."
  type        = number
  default     = 50
}

variable "registry_pool_size" {
  description = "Registry connections per function instance (OBSINGEST_REGISTRY_POOL_SIZE)."
  type        = number
  default     = 2
}

variable "max_delivery_attempts" {
  description = "Push deliveries of one notification before it goes to ccd-objects-dlq."
  type        = number
  default     = 10
}
