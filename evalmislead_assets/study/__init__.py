"""What the study is made of: the HumanEvalPack problems and the six prompt conditions."""
