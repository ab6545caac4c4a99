"""PerRecBench's own fine-tuning code: `sft data` examples of its methods from its train groups
(`sft.perrecbench.data`, settings in `sft.perrecbench.config`); training, merging and upload are general
(`sft.train`, `sft.merge`, `sft.push`)."""
