# test_world decodes the files the generator writes with stb_image.
target_include_directories(test_world PRIVATE ${STB_INCLUDE})
