"""What people read and CI consumes: terminal, Markdown, HTML, JSON, JUnit, history."""
