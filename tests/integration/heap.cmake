rbpeek_matrix_test(heap test_heap.py TIMEOUT 900)
