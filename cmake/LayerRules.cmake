# The layers of core/src, bottom first, and what each may include: its own
# headers and those of the layers it SEES, never a layer above it or beside
# it. Read by Layers.cmake (the build: each layer compiled with only these
# folders on its include path) and by CheckLayers.cmake (the ctest check
# layers.check, which also reads the headers no compile would catch).
# docs/design.md draws the same picture.
set(RBPEEK_LAYERS base memory native layout context vm heap locks profile inspect output)
set(RBPEEK_SEES_base    "")
set(RBPEEK_SEES_memory  base)
set(RBPEEK_SEES_native  base memory)
set(RBPEEK_SEES_layout  base memory)
set(RBPEEK_SEES_context base memory native layout)
set(RBPEEK_SEES_vm      base memory native layout context)
set(RBPEEK_SEES_heap    base memory layout context vm)
set(RBPEEK_SEES_locks   base memory layout context vm)
set(RBPEEK_SEES_profile base memory native layout context vm)
set(RBPEEK_SEES_inspect base memory layout context vm heap)
set(RBPEEK_SEES_output  base memory native layout context vm heap profile inspect)
# core/src/session.c sits on top of them all.
