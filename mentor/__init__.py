"""mentor: answers learners' questions grounded in the study module they are reading."""

__version__ = "0.1.0"
