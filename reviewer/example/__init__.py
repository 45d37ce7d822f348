"""The example review that ships with the product (loaded by ``manage.py load_example``)."""
