"""Training one seed: the LightningModule, the datamodule, resumable checkpoints, `fine_tune`."""
