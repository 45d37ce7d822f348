"""The example reviews that ship with the product (loaded by ``manage.py load_example``)."""
