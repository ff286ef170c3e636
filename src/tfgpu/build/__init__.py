"""The effects: run a Plan's steps, the environment registry, locks, using an environment, the create pipeline."""
