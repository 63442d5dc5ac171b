"""evalmislead: does a model's unit test lock in the bug of the code it tests?"""
