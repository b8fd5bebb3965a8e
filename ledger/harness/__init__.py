"""Measuring helpers for campaigns (see measure.py); nothing in the ledger imports them."""
