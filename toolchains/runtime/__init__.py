"""Executed instructions of a built kernel under QEMU TCG (issue 26): the plugin, the guest, the measurement."""
