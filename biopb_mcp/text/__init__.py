"""Every sentence an agent or a terminal reads, worded over the facts the domain returns."""
