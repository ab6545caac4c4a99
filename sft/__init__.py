"""Fine-tuning for personalization (paper §6): training examples from a family's train split
(`sft.perrecbench.data` for PerRecBench, `sft.family_data` for a family on the general path; the folder they
write: `sft.examples`), LoRA training with TRL (`sft.train`), adapter merging (`sft.merge`) and Hub upload
with a model card (`sft.push`, `sft.card`); `perrecbench sft ...` on the command line (`sft.cli`)."""
