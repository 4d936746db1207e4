"""Local stand-in for the Hugging Face Hub and ModelScope download APIs (tests and lab only)."""
