"""What the machine is: the probes read the world into a facts document; overrides; the Machine a verdict reads. Imports core and kb."""
