// Test support library sources live in this folder.
