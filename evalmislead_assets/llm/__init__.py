"""The model: the OpenAI-compatible client, its call cache and types, prompts, reasoning, llama-server, the bundled model."""
