"""Trainers that learn from the database's exports, repository by repository."""
