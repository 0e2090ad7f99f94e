"""Text around the model, torch-free: prompts, template arguments, reasoning blocks, detokenising."""
