variable "project" {
  description = "GCP project that hosts the data-facility side of obsingest."
  type        = string
}

variable "region" {
  description = "Region of the bucket, the workloads, the registry and the Pub/Sub push endpoint."
  type        = string
  default     = "us-central1"
}

variable "bucket" {
  description = "Bucket the edge and the assembler write raw CCDs to (raw/...), refused bytes to (quarantine/...); reconcile writes its canaries under canary/."
  type        = string
}

variable "images" {
  description = "Container images, pinned by digest (NAME@sha256:...). One obsingest image may serve every piece; `beam` is the Dataflow SDK container (obsingest, schemas and beam_jobs installed)."
  type = object({
    assembler = string
    reconcile = string
    redrive   = string
    presence  = string
    beam      = string
  })
  validation {
    condition     = alltrue([for image in values(var.images) : can(regex("@sha256:[0-9a-f]{64}$", image))])
    error_message = "Every image must be pinned by digest (NAME@sha256:<64 hex>): a tag can move under a running deployment."
  }
}

variable "function_source_bucket" {
  description = "Bucket holding the zipped register function source (`make function-zip` output uploaded there)."
  type        = string
}

variable "function_source_object" {
  description = "Object name of the zipped function source in function_source_bucket."
  type        = string
}

variable "max_instances" {
  description = "Upper bound on register function instances. With registry_pool_size this bounds DB connections: keep max_instances * registry_pool_size plus the other pieces' pools below registry_max_connections."
  type        = number
  default     = 50
}

variable "min_instances" {
  description = "Register function instances kept warm. At least 2: a crashed instance then costs its in-flight deliveries one sub-second redelivery (push_min_backoff) to a live instance instead of a cold start inside an exposure's 7 s budget."
  type        = number
  default     = 2
  validation {
    condition     = var.min_instances >= 2
    error_message = "Keep at least 2 register function instances: one crash must cost no CCD its budget."
  }
}

variable "registry_pool_size" {
  description = "Registry connections per process (OBSINGEST_REGISTRY_POOL_SIZE) of the register function, reconcile and the presence API."
  type        = number
  default     = 2
}

variable "max_delivery_attempts" {
  description = "Push deliveries of one notification before Pub/Sub moves it to ccd-objects-dlq (Pub/Sub allows 5..100). 11 from a 0.5 s minimum backoff doubling to 60 s span ~243 s, the outage the 1 s / 10-attempt policy rode out before."
  type        = number
  default     = 11
  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "Pub/Sub accepts 5..100 delivery attempts."
  }
}

variable "push_min_backoff" {
  description = "Push retry policy, first redelivery delay. Sub-second, so a delivery lost to a crashed instance is redelivered (to a live one, min_instances) well inside the budget; the relay fails over to another instance at once instead (OBSINGEST_RELAY_PUSH_URLS) and keeps its whole-second backoff for the function's own 503s."
  type        = string
  default     = "0.5s"
  validation {
    condition     = tonumber(trimsuffix(var.push_min_backoff, "s")) <= 1
    error_message = "push_min_backoff above 1 s makes one crashed instance cost a CCD its budget."
  }
}

variable "push_max_backoff" {
  description = "Push retry policy, largest redelivery delay (the relay's OBSINGEST_RELAY_MAX_BACKOFF mirrors it). 0.5 s doubling to 60 s over 11 attempts rides out a ~4-minute outage before dead-lettering."
  type        = string
  default     = "60s"
}

variable "noncurrent_version_days" {
  description = "Days a deleted or replaced raw object stays recoverable as a noncurrent version."
  type        = number
  default     = 30
}

variable "network_cidr" {
  description = "Primary range of the workloads' subnet (Cloud Run direct VPC egress, Dataflow workers)."
  type        = string
  default     = "10.20.0.0/20"
}

variable "connector_cidr" {
  description = "/28 range for the Serverless VPC Access connector of the register function."
  type        = string
  default     = "10.20.16.0/28"
}

variable "registry_tier" {
  description = "Cloud SQL machine tier of the registry."
  type        = string
  default     = "db-custom-2-7680"
}

variable "registry_max_connections" {
  description = "PostgreSQL max_connections of the registry (see max_instances)."
  type        = number
  default     = 200
}

variable "registry_deletion_protection" {
  description = "Refuse to destroy the registry instance (Terraform and API level)."
  type        = bool
  default     = true
}

variable "kafka_bootstrap_servers" {
  description = "Kafka bootstrap servers of the chunked transport (ccd-chunks), reachable from the VPC (private ranges)."
  type        = string
}

variable "kafka_client_secret" {
  description = "Optional Secret Manager secret id whose latest version is a JSON object of extra librdkafka properties for the assembler (SASL/TLS), read as OBSINGEST_ASSEMBLER_EXTRA. null: none."
  type        = string
  default     = null
}

variable "assembler_instances" {
  description = "Assembler instances (one consumer each in group ccd-assembler); more than the partitions of ccd-chunks would idle."
  type        = number
  default     = 2
}

variable "reconcile_every_seconds" {
  description = "Seconds between reconcile rounds (bucket vs registry, canary written and awaited)."
  type        = number
  default     = 60
}

variable "redrive_schedule" {
  description = "Cron schedule (UTC) of the redrive job: dead-lettered notifications back to ccd-objects."
  type        = string
  default     = "*/5 * * * *"
}

variable "presence_invokers" {
  description = "IAM members allowed to call the presence API (e.g. serviceAccount:prompt-processing@P.iam.gserviceaccount.com)."
  type        = list(string)
  default     = []
}

variable "presence_max_instances" {
  description = "Upper bound on presence API instances (each holds registry_pool_size read-only connections)."
  type        = number
  default     = 10
}

variable "metrics_sidecar_image" {
  description = "Optional Managed Service for Prometheus sidecar image for Cloud Run; when set, each long-running container's /metrics is scraped per instance into Cloud Monitoring. null: no sidecar."
  type        = string
  default     = null
}
