"""The run's loop: sessions started, paced and stopped (closed loop, open loop), the live view."""
