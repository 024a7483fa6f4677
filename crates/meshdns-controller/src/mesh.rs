//! Mesh controller (to come).
