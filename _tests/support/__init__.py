"""Helpers shared by the tests (imported as ``_tests.support.<module>``)."""
