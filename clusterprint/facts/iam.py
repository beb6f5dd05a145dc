"""The predefined IAM roles the node accounts are granted, each the narrowest that does the job.

The components grant these and nothing else, and the policy ``least-privilege-identity``
(clusterprint.preview.policies ``ALLOWED_ROLES``) allows these and nothing else: both read
them here, so a role added for a new need is granted and allowed at once.
"""

from __future__ import annotations

#: Project-wide roles every node account holds: the Ops Agent ships logs and metrics.
NODE_PROJECT_ROLES = ("roles/logging.logWriter", "roles/monitoring.metricWriter")
#: The controller writes the munge key (and the REST API's JWT key) once, on first boot,
#: and reads it back on every later boot. The script lists the versions to learn whether a
#: key exists yet: secretAccessor grants only versions.access and secretVersionAdder only
#: versions.add, so viewer adds versions.list.
MUNGE_WRITER_ROLES = ("roles/secretmanager.secretVersionAdder",
                      "roles/secretmanager.secretAccessor",
                      "roles/secretmanager.viewer")
#: What login and compute nodes may do with the munge key: read it.
MUNGE_READER_ROLES = ("roles/secretmanager.secretAccessor",)
#: What the login node needs with ``observability.tensorboard``: write runs to the cluster's
#: Vertex AI TensorBoard (aiplatform.tensorboardExperiments.write, tensorboardRuns.write,
#: tensorboardTimeSeries.create) and register checkpoints in Model Registry
#: (aiplatform.models.upload). Vertex AI User is the narrowest predefined role holding both
#: (cloud.google.com/vertex-ai/docs/general/access-control, "Vertex AI predefined roles");
#: the TensorBoard web app role only reads. Granted to the login account alone.
VERTEX_AI_ROLE = "roles/aiplatform.user"
#: What the controller needs with ``slurm.accounting.cloud_sql``: read the instance's private
#: IP at boot (``gcloud sql instances describe``, cloudsql.instances.get). Cloud SQL Viewer is
#: the narrowest predefined role holding it (cloud.google.com/sql/docs/mysql/iam-roles,
#: "Predefined roles"); granted to the controller account alone, in the instance's project.
CLOUD_SQL_VIEWER_ROLE = "roles/cloudsql.viewer"
#: What a node may do in a bucket it mounts with Cloud Storage FUSE: read and write objects.
BUCKET_ROLE = "roles/storage.objectUser"
