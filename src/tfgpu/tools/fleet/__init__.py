"""`tfgpu fleet`: merge the doctor reports of many machines; print the per-node runs for Slurm, Kubernetes, Ansible."""
