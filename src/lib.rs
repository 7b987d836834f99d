//! Tessera facade
