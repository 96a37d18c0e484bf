// Anchor translation unit for the shared precompiled header of torch targets.
