"""The two answer engines (LLM over the OpenAI SDK, offline extractive) and the calculator planner."""
