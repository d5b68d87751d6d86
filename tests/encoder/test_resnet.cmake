# test_resnet: the ModifiedResNet towers against PyTorch (tests/golden/models/rn_*),
# every RN size from sparse real-shape files opened inspect-only, and the refusals.
# Writes the headers and configs with jansson.
target_link_libraries(test_resnet PRIVATE PkgConfig::JANSSON)
set_tests_properties(test_resnet PROPERTIES LABELS "unit;golden")
