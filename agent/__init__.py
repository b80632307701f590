"""The browser agent: Playwright driver, decision loop, policies, prompts and the memory facade."""
