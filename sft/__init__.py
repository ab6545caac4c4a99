"""Fine-tuning for personalization (paper §6): training data from the train split (`sft.data`), LoRA
training with TRL (`sft.train`), adapter merging (`sft.merge`) and Hub upload with a model card
(`sft.push`, `sft.card`); `perrecbench sft ...` on the command line (`sft.cli`)."""
