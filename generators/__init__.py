"""Faker-based, seeded event generators, one module per pattern."""
