"""ragen2's own offline coding problems for the DeepCoder environment (written for this package).

Six families (strings, arithmetic, lists, dynamic programming, input parsing, grids) at three
difficulty levels (1 easy, 2 medium, 3 hard). Each problem carries DeepCoder-schema tests (both
``functional`` and ``stdin`` kinds occur), a reference solution and a one-line plan that the expert
uses as its reasoning. Expected outputs were worked out by hand; ``tests/envs/test_deepcoder.py``
runs every reference solution against its tests in the sandbox.
"""

from __future__ import annotations

import json
from typing import Any

FAMILIES = ("strings", "arithmetic", "lists", "dp", "parsing", "grids")
PROBLEMS: list[dict[str, Any]] = []


def _functional(
    pid: str, level: int, title: str, statement: str, func: str, params: str,
    cases: list[tuple[list, Any]], solution: str, plan: str,
) -> None:
    """Add a LeetCode-style problem: ``Solution().<func>(*args)`` must return the expected value."""
    tests = [
        {
            "input": "\n".join(json.dumps(arg) for arg in args),
            "output": json.dumps(expected),
            "testtype": "functional",
            "metadata": {"func_name": func},
        }
        for args, expected in cases
    ]
    starter = f"class Solution:\n    def {func}(self, {params}):\n        "
    _add(pid, level, title, statement, tests, starter, solution, plan)


def _stdin(
    pid: str, level: int, title: str, statement: str, cases: list[tuple[str, str]], solution: str, plan: str
) -> None:
    """Add a judge-style problem: the program reads stdin and prints the answer."""
    tests = [{"input": given, "output": wanted, "testtype": "stdin", "metadata": {}} for given, wanted in cases]
    _add(pid, level, title, statement, tests, "", solution, plan)


def _add(pid, level, title, statement, tests, starter, solution, plan) -> None:
    family = pid.split("-")[0]
    assert family in FAMILIES and level in (1, 2, 3), pid
    PROBLEMS.append(
        {
            "id": pid,
            "family": family,
            "difficulty": level,
            "title": title,
            "problem": f"{title}\n\n{statement.strip()}",
            "tests": tests,
            "starter_code": starter,
            "solution": solution.strip() + "\n",
            "plan": plan,
        }
    )


# ---------------------------------------------------------------------------------------------
# strings
# ---------------------------------------------------------------------------------------------
_functional(
    "strings-reverse-words", 1, "Reverse Every Word",
    "Given a sentence `s` of words separated by single spaces, reverse the letters of every word "
    "but keep the words in their order. Return the new sentence.",
    "reverse_each_word", "s",
    [(["hello world"], "olleh dlrow"), (["a"], "a"), (["ab cd ef"], "ba dc fe"), ([""], "")],
    """
class Solution:
    def reverse_each_word(self, s):
        return " ".join(word[::-1] for word in s.split(" "))
""",
    "reverse each word then join them with spaces",
)
_functional(
    "strings-count-vowels", 1, "Count Vowels",
    "Return how many characters of `s` are vowels (a, e, i, o, u in either case).",
    "count_vowels", "s",
    [(["banana"], 3), (["xyz"], 0), (["AEIOU aeiou"], 10), ([""], 0)],
    """
class Solution:
    def count_vowels(self, s):
        return sum(1 for ch in s if ch.lower() in "aeiou")
""",
    "count the characters whose lower-case form is in 'aeiou'",
)
_stdin(
    "strings-swap-case", 1, "Swap Case",
    "Read one line of text and print it with every lower-case letter turned upper-case and every "
    "upper-case letter turned lower-case. Other characters stay as they are.",
    [("Hello World\n", "hELLO wORLD\n"), ("abc\n", "ABC\n"), ("123 aB\n", "123 Ab\n")],
    """
line = input()
print(line.swapcase())
""",
    "read the line and print line.swapcase()",
)
_functional(
    "strings-clean-palindrome", 2, "Palindrome After Cleaning",
    "Return true if `s` reads the same forwards and backwards after removing every character that "
    "is not a letter or a digit and ignoring case, else false.",
    "is_clean_palindrome", "s",
    [(["A man, a plan, a canal: Panama"], True), (["race a car"], False), ([""], True), (["0P"], False)],
    """
class Solution:
    def is_clean_palindrome(self, s):
        kept = [ch.lower() for ch in s if ch.isalnum()]
        return kept == kept[::-1]
""",
    "keep lower-cased alphanumerics, compare the list with its reverse",
)
_functional(
    "strings-run-length", 2, "Run-Length Encoding",
    "Encode `s` by replacing each maximal run of equal characters with the character followed by "
    "the run length, e.g. `aaabcc` becomes `a3b1c2`. Return the encoding (empty for an empty string).",
    "encode_runs", "s",
    [(["aaabccdddd"], "a3b1c2d4"), ([""], ""), (["z"], "z1"), (["abab"], "a1b1a1b1")],
    """
class Solution:
    def encode_runs(self, s):
        parts = []
        i = 0
        while i < len(s):
            j = i
            while j < len(s) and s[j] == s[i]:
                j += 1
            parts.append(s[i] + str(j - i))
            i = j
        return "".join(parts)
""",
    "walk the string, measure each run of equal characters, emit char plus length",
)
_stdin(
    "strings-anagram", 2, "Anagram Check",
    "Read two words, one per line. Print YES if one is a rearrangement of the other's letters, else NO.",
    [("listen\nsilent\n", "YES\n"), ("abc\nabd\n", "NO\n"), ("aab\naba\n", "YES\n"), ("ab\nabc\n", "NO\n")],
    """
first = input().strip()
second = input().strip()
print("YES" if sorted(first) == sorted(second) else "NO")
""",
    "compare the sorted letters of the two words",
)
_functional(
    "strings-longest-unique", 3, "Longest Run Without Repeats",
    "Return the length of the longest contiguous substring of `s` in which no character repeats.",
    "longest_unique", "s",
    [(["abcabcbb"], 3), (["bbbbb"], 1), (["pwwkew"], 3), ([""], 0), (["dvdf"], 3)],
    """
class Solution:
    def longest_unique(self, s):
        last_seen = {}
        start = best = 0
        for i, ch in enumerate(s):
            if ch in last_seen and last_seen[ch] >= start:
                start = last_seen[ch] + 1
            last_seen[ch] = i
            best = max(best, i - start + 1)
        return best
""",
    "sliding window: move the start past the previous copy of each repeated character",
)
_stdin(
    "strings-top-word", 3, "Most Frequent Word",
    "Read one line of lower-case words separated by spaces. Print the most frequent word and its "
    "count separated by a space; on a tie print the alphabetically smallest of the tied words.",
    [("the cat and the hat\n", "the 2\n"), ("b a\n", "a 1\n"), ("x x y y z\n", "x 2\n")],
    """
from collections import Counter

counts = Counter(input().split())
word, count = min(counts.items(), key=lambda item: (-item[1], item[0]))
print(word, count)
""",
    "count words, pick the highest count and break ties alphabetically",
)

# ---------------------------------------------------------------------------------------------
# arithmetic
# ---------------------------------------------------------------------------------------------
_functional(
    "arithmetic-digit-sum", 1, "Digit Sum",
    "Return the sum of the decimal digits of the non-negative integer `n`.",
    "digit_sum", "n",
    [([123], 6), ([0], 0), ([9999], 36), ([1000], 1)],
    """
class Solution:
    def digit_sum(self, n):
        return sum(int(d) for d in str(n))
""",
    "add up the digits of str(n)",
)
_stdin(
    "arithmetic-triangle", 1, "Sum Up To N",
    "Read a positive integer n and print 1 + 2 + ... + n.",
    [("5\n", "15\n"), ("1\n", "1\n"), ("100\n", "5050\n")],
    """
n = int(input())
print(n * (n + 1) // 2)
""",
    "use the formula n(n+1)/2",
)
_functional(
    "arithmetic-sequence-term", 1, "Arithmetic Sequence Term",
    "An arithmetic sequence starts at `a` and adds `d` each step. Return its `n`-th term (the first "
    "term is term 1).",
    "nth_term", "a, d, n",
    [([2, 3, 1], 2), ([2, 3, 4], 11), ([10, -2, 6], 0), ([0, 0, 100], 0)],
    """
class Solution:
    def nth_term(self, a, d, n):
        return a + (n - 1) * d
""",
    "term n is a + (n - 1) * d",
)
_functional(
    "arithmetic-gcd-list", 2, "GCD of a List",
    "Return the greatest common divisor of the non-empty list `nums` of non-negative integers "
    "(not all zero).",
    "gcd_of_list", "nums",
    [([[12, 18, 24]], 6), ([[7]], 7), ([[5, 10, 0]], 5), ([[17, 13]], 1)],
    """
class Solution:
    def gcd_of_list(self, nums):
        result = 0
        for x in nums:
            a, b = result, x
            while b:
                a, b = b, a % b
            result = a
        return result
""",
    "fold Euclid's algorithm over the list starting from 0",
)
_stdin(
    "arithmetic-count-primes", 2, "Count Primes",
    "Read an integer n (1 <= n <= 100000) and print how many primes are less than or equal to n.",
    [("10\n", "4\n"), ("1\n", "0\n"), ("2\n", "1\n"), ("30\n", "10\n"), ("100\n", "25\n")],
    """
n = int(input())
is_prime = [True] * (n + 1)
is_prime[0] = False
if n >= 1:
    is_prime[1] = False
for p in range(2, int(n ** 0.5) + 1):
    if is_prime[p]:
        for multiple in range(p * p, n + 1, p):
            is_prime[multiple] = False
print(sum(is_prime))
""",
    "sieve of Eratosthenes up to n, then count the survivors",
)
_functional(
    "arithmetic-fibonacci", 2, "Fibonacci Number",
    "Return F(n) where F(0) = 0, F(1) = 1 and F(n) = F(n-1) + F(n-2).",
    "fib", "n",
    [([0], 0), ([1], 1), ([10], 55), ([20], 6765), ([50], 12586269025)],
    """
class Solution:
    def fib(self, n):
        a, b = 0, 1
        for _ in range(n):
            a, b = b, a + b
        return a
""",
    "iterate the pair (F(k), F(k+1)) n times",
)
_functional(
    "arithmetic-collatz", 3, "Collatz Steps",
    "Starting from the positive integer `n`, repeatedly replace n by n / 2 if it is even and by "
    "3n + 1 if it is odd. Return how many replacements it takes to reach 1.",
    "collatz_steps", "n",
    [([1], 0), ([6], 8), ([7], 16), ([27], 111)],
    """
class Solution:
    def collatz_steps(self, n):
        steps = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        return steps
""",
    "simulate the rule and count the steps until n is 1",
)
_stdin(
    "arithmetic-base-convert", 3, "Change of Base",
    "Read two integers n (n >= 0) and b (2 <= b <= 16) on one line. Print n written in base b, using "
    "the digits 0-9 and then upper-case A-F.",
    [("10 2\n", "1010\n"), ("255 16\n", "FF\n"), ("0 7\n", "0\n"), ("100 7\n", "202\n")],
    """
n, b = map(int, input().split())
digits = "0123456789ABCDEF"
out = ""
while True:
    out = digits[n % b] + out
    n //= b
    if n == 0:
        break
print(out)
""",
    "repeatedly take n mod b as the next digit from the right, until n is 0",
)

# ---------------------------------------------------------------------------------------------
# lists
# ---------------------------------------------------------------------------------------------
_functional(
    "lists-second-largest", 1, "Second Largest Value",
    "Return the second largest distinct value in `nums`, or -1 if there are fewer than two "
    "distinct values.",
    "second_largest", "nums",
    [([[3, 1, 4, 1, 5]], 4), ([[2, 2, 1]], 1), ([[5, 5]], -1), ([[10, 20]], 10)],
    """
class Solution:
    def second_largest(self, nums):
        values = sorted(set(nums))
        return values[-2] if len(values) >= 2 else -1
""",
    "sort the distinct values and take the one before the last",
)
_stdin(
    "lists-range", 1, "Spread of Numbers",
    "Read n, then n integers on the next line. Print the largest minus the smallest.",
    [("3\n4 9 1\n", "8\n"), ("1\n5\n", "0\n"), ("4\n-3 -7 2 2\n", "9\n")],
    """
n = int(input())
values = list(map(int, input().split()))
print(max(values) - min(values))
""",
    "read the numbers and print max minus min",
)
_functional(
    "lists-dedupe", 1, "Remove Duplicates",
    "Return `nums` without repeated values, keeping the first occurrence of each value in order.",
    "dedupe", "nums",
    [([[1, 2, 1, 3, 2]], [1, 2, 3]), ([[]], []), ([[4, 4, 4]], [4])],
    """
class Solution:
    def dedupe(self, nums):
        seen = set()
        out = []
        for x in nums:
            if x not in seen:
                seen.add(x)
                out.append(x)
        return out
""",
    "keep a set of seen values and append each value the first time it appears",
)
_functional(
    "lists-rotate", 2, "Rotate Right",
    "Return `nums` rotated `k` places to the right (k >= 0; k may exceed the length).",
    "rotate_right", "nums, k",
    [([[1, 2, 3, 4, 5], 2], [4, 5, 1, 2, 3]), ([[1, 2], 5], [2, 1]), ([[], 3], []), ([[7], 0], [7])],
    """
class Solution:
    def rotate_right(self, nums, k):
        if not nums:
            return []
        k %= len(nums)
        return nums[len(nums) - k:] + nums[:len(nums) - k]
""",
    "reduce k modulo the length, then move the last k items to the front",
)
_functional(
    "lists-two-sum", 2, "Pair With Target Sum",
    "Return `[i, j]` with i < j and nums[i] + nums[j] == target, choosing the smallest possible j and "
    "then the smallest i. Return `[]` if there is no such pair.",
    "pair_sum", "nums, target",
    [([[2, 7, 11, 15], 9], [0, 1]), ([[3, 2, 4], 6], [1, 2]), ([[1, 2], 7], []), ([[3, 3], 6], [0, 1])],
    """
class Solution:
    def pair_sum(self, nums, target):
        first_index = {}
        for j, x in enumerate(nums):
            if target - x in first_index:
                return [first_index[target - x], j]
            first_index.setdefault(x, j)
        return []
""",
    "scan j left to right, remembering the first index of each value seen so far",
)
_stdin(
    "lists-merge-sorted", 2, "Merge Two Sorted Lines",
    "Read two lines, each holding integers in non-decreasing order. Print all the numbers in "
    "non-decreasing order on one line, separated by spaces.",
    [("1 3 5\n2 4 6\n", "1 2 3 4 5 6\n"), ("1 1\n1\n", "1 1 1\n"), ("5\n1 2\n", "1 2 5\n")],
    """
left = list(map(int, input().split()))
right = list(map(int, input().split()))
merged = []
i = j = 0
while i < len(left) and j < len(right):
    if left[i] <= right[j]:
        merged.append(left[i])
        i += 1
    else:
        merged.append(right[j])
        j += 1
merged += left[i:] + right[j:]
print(" ".join(map(str, merged)))
""",
    "two-pointer merge, then append whatever remains",
)
_functional(
    "lists-max-subarray", 3, "Best Contiguous Sum",
    "Return the largest sum of a non-empty contiguous part of `nums`.",
    "best_run_sum", "nums",
    [([[-2, 1, -3, 4, -1, 2, 1, -5, 4]], 6), ([[-3, -1, -2]], -1), ([[5]], 5), ([[1, 2, 3]], 6)],
    """
class Solution:
    def best_run_sum(self, nums):
        best = current = nums[0]
        for x in nums[1:]:
            current = max(x, current + x)
            best = max(best, current)
        return best
""",
    "Kadane: extend the current run or restart at x, tracking the best sum",
)
_stdin(
    "lists-inversions", 3, "Count Inversions",
    "Read n, then n integers. Print the number of pairs (i, j) with i < j and a[i] > a[j].",
    [("5\n2 4 1 3 5\n", "3\n"), ("3\n1 2 3\n", "0\n"), ("4\n4 3 2 1\n", "6\n")],
    """
def sort_count(values):
    if len(values) <= 1:
        return values, 0
    mid = len(values) // 2
    left, a = sort_count(values[:mid])
    right, b = sort_count(values[mid:])
    merged, count, i, j = [], a + b, 0, 0
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            merged.append(left[i])
            i += 1
        else:
            merged.append(right[j])
            count += len(left) - i
            j += 1
    return merged + left[i:] + right[j:], count


n = int(input())
print(sort_count(list(map(int, input().split())))[1])
""",
    "merge sort, adding the number of left items still waiting whenever a right item is taken",
)

# ---------------------------------------------------------------------------------------------
# dynamic programming
# ---------------------------------------------------------------------------------------------
_functional(
    "dp-stairs", 1, "Climbing Stairs",
    "You climb a staircase of `n` steps (n >= 1), taking 1 or 2 steps at a time. Return the number "
    "of different ways to reach the top.",
    "climb_ways", "n",
    [([1], 1), ([2], 2), ([3], 3), ([5], 8), ([10], 89)],
    """
class Solution:
    def climb_ways(self, n):
        a, b = 1, 1
        for _ in range(n - 1):
            a, b = b, a + b
        return b
""",
    "ways(n) = ways(n-1) + ways(n-2), a Fibonacci recurrence",
)
_functional(
    "dp-non-adjacent", 1, "Best Non-Adjacent Sum",
    "Return the largest sum of elements of `nums` (all >= 0) that you can pick without picking two "
    "neighbours. Picking nothing gives 0.",
    "best_non_adjacent", "nums",
    [([[1, 2, 3, 1]], 4), ([[2, 7, 9, 3, 1]], 12), ([[5]], 5), ([[]], 0)],
    """
class Solution:
    def best_non_adjacent(self, nums):
        take, skip = 0, 0
        for x in nums:
            take, skip = skip + x, max(take, skip)
        return max(take, skip)
""",
    "track the best sum that takes or skips the current element",
)
_stdin(
    "dp-coin-ways", 1, "Coin Combinations",
    "Read n (n >= 0). Print in how many ways n can be written as a sum of coins worth 1, 2 and 5, "
    "where the order of the coins does not matter.",
    [("5\n", "4\n"), ("0\n", "1\n"), ("3\n", "2\n"), ("10\n", "10\n")],
    """
n = int(input())
ways = [1] + [0] * n
for coin in (1, 2, 5):
    for total in range(coin, n + 1):
        ways[total] += ways[total - coin]
print(ways[n])
""",
    "unbounded-knapsack counting with coins in the outer loop so order does not matter",
)
_functional(
    "dp-lis", 2, "Longest Increasing Subsequence",
    "Return the length of the longest strictly increasing subsequence of `nums`.",
    "lis_length", "nums",
    [([[10, 9, 2, 5, 3, 7, 101, 18]], 4), ([[0, 1, 0, 3, 2, 3]], 4), ([[7, 7, 7]], 1), ([[]], 0)],
    """
class Solution:
    def lis_length(self, nums):
        best = [1] * len(nums)
        for i in range(len(nums)):
            for j in range(i):
                if nums[j] < nums[i]:
                    best[i] = max(best[i], best[j] + 1)
        return max(best, default=0)
""",
    "best[i] = 1 + the best over earlier smaller elements; answer is the maximum",
)
_functional(
    "dp-edit-distance", 2, "Edit Distance",
    "Return the least number of single-character insertions, deletions and substitutions that turn "
    "`a` into `b`.",
    "edit_distance", "a, b",
    [(["horse", "ros"], 3), (["intention", "execution"], 5), (["", "abc"], 3), (["same", "same"], 0)],
    """
class Solution:
    def edit_distance(self, a, b):
        row = list(range(len(b) + 1))
        for i in range(1, len(a) + 1):
            previous, row[0] = row[0], i
            for j in range(1, len(b) + 1):
                current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] != b[j - 1]))
                previous = current
        return row[len(b)]
""",
    "classic DP table over prefixes, kept as one rolling row",
)
_stdin(
    "dp-grid-paths", 2, "Monotone Grid Paths",
    "Read r and c. Print how many paths go from the top-left to the bottom-right cell of an r x c "
    "grid moving only right or down.",
    [("3 7\n", "28\n"), ("1 1\n", "1\n"), ("3 2\n", "3\n"), ("10 10\n", "48620\n")],
    """
r, c = map(int, input().split())
row = [1] * c
for _ in range(r - 1):
    for j in range(1, c):
        row[j] += row[j - 1]
print(row[-1])
""",
    "paths to a cell = paths from above + paths from the left",
)
_functional(
    "dp-lcs", 3, "Longest Common Subsequence",
    "Return the length of the longest sequence of characters that appears, in order but not "
    "necessarily contiguously, in both `a` and `b`.",
    "lcs_length", "a, b",
    [(["abcde", "ace"], 3), (["abc", "def"], 0), (["AGGTAB", "GXTXAYB"], 4), (["", "x"], 0)],
    """
class Solution:
    def lcs_length(self, a, b):
        table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                if a[i - 1] == b[j - 1]:
                    table[i][j] = table[i - 1][j - 1] + 1
                else:
                    table[i][j] = max(table[i - 1][j], table[i][j - 1])
        return table[len(a)][len(b)]
""",
    "prefix DP: match extends the diagonal, otherwise take the better neighbour",
)
_stdin(
    "dp-knapsack", 3, "Knapsack",
    "The first line holds n and W. Each of the next n lines holds the weight and value of an item. "
    "Print the largest total value of items whose total weight is at most W (each item at most once).",
    [("3 50\n10 60\n20 100\n30 120\n", "220\n"), ("1 5\n6 10\n", "0\n"), ("4 7\n1 1\n3 4\n4 5\n5 7\n", "9\n")],
    """
n, capacity = map(int, input().split())
best = [0] * (capacity + 1)
for _ in range(n):
    weight, value = map(int, input().split())
    for room in range(capacity, weight - 1, -1):
        best[room] = max(best[room], best[room - weight] + value)
print(best[capacity])
""",
    "0/1 knapsack over capacities, iterating capacity downwards so each item is used once",
)

# ---------------------------------------------------------------------------------------------
# input parsing
# ---------------------------------------------------------------------------------------------
_stdin(
    "parsing-line-sum", 1, "Sum of a Line",
    "Read one line of integers separated by spaces and print their sum.",
    [("1 2 3\n", "6\n"), ("-5 5\n", "0\n"), ("42\n", "42\n")],
    """
print(sum(map(int, input().split())))
""",
    "split the line, convert to int, print the sum",
)
_stdin(
    "parsing-word-count", 1, "Count Words",
    "The first line holds n; n lines of text follow. Print the total number of words (maximal runs "
    "of non-space characters) in those lines.",
    [("2\nhello world\nfoo\n", "3\n"), ("1\n  spaced   out  \n", "2\n"), ("3\na\nb c d\ne\n", "5\n")],
    """
n = int(input())
print(sum(len(input().split()) for _ in range(n)))
""",
    "read the n lines and add up len(line.split())",
)
_stdin(
    "parsing-csv-sum", 1, "Score Column",
    "The first line holds n; each of the next n lines is `name,score`. Print the sum of the scores.",
    [("3\nann,5\nbob,7\ncid,-2\n", "10\n"), ("1\nx,0\n", "0\n"), ("2\nlee,100\nmo,23\n", "123\n")],
    """
n = int(input())
total = 0
for _ in range(n):
    name, score = input().split(",")
    total += int(score)
print(total)
""",
    "split each line at the comma and add the second field",
)
_stdin(
    "parsing-key-value", 2, "Settings Lookup",
    "The first line holds n; each of the next n lines is `key=value` (split at the first `=`; a later "
    "line overrides an earlier one with the same key). The last line is a key. Print its value, or "
    "MISSING if it was never set.",
    [("3\na=1\nb=2\na=3\na\n", "3\n"), ("1\nx=hello world\ny\n", "MISSING\n"), ("2\nk=v=w\nz=0\nk\n", "v=w\n")],
    """
n = int(input())
settings = {}
for _ in range(n):
    key, value = input().split("=", 1)
    settings[key] = value
print(settings.get(input(), "MISSING"))
""",
    "fill a dict with line.split('=', 1) and look the last line up",
)
_stdin(
    "parsing-plus-minus", 2, "Plus and Minus",
    "Read an expression made of non-negative integers joined by `+` and `-` (no spaces) and print "
    "its value.",
    [("1+2-3\n", "0\n"), ("10-20+5\n", "-5\n"), ("7\n", "7\n"), ("100+200+300\n", "600\n")],
    """
expression = input().strip()
total, number, sign = 0, 0, 1
for ch in expression + "+":
    if ch.isdigit():
        number = number * 10 + int(ch)
    else:
        total += sign * number
        number, sign = 0, (1 if ch == "+" else -1)
print(total)
""",
    "scan digits into a number and add it with the last sign at each operator",
)
_functional(
    "parsing-clock-gap", 2, "Minutes Between Times",
    "Times are strings `HH:MM` on a 24-hour clock. Return how many minutes pass from `start` until "
    "the clock next shows `end` (0 if they are equal).",
    "minutes_between", "start, end",
    [(["23:50", "00:10"], 20), (["08:00", "08:00"], 0), (["00:00", "23:59"], 1439), (["12:30", "13:15"], 45)],
    """
class Solution:
    def minutes_between(self, start, end):
        def minutes(text):
            hours, mins = text.split(":")
            return int(hours) * 60 + int(mins)

        return (minutes(end) - minutes(start)) % (24 * 60)
""",
    "convert both to minutes after midnight and take the difference modulo 1440",
)
_stdin(
    "parsing-arithmetic", 3, "Calculator",
    "Read an integer expression with `+`, `-`, `*`, parentheses and unary minus (no spaces) and print "
    "its value. `*` binds tighter than `+` and `-`, which group left to right.",
    [("2+3*4\n", "14\n"), ("(2+3)*4\n", "20\n"), ("10-(4-2)*3\n", "4\n"), ("-(3)+5\n", "2\n")],
    """
text = input().strip()
pos = 0


def peek():
    return text[pos] if pos < len(text) else ""


def expression():
    global pos
    value = term()
    while peek() in ("+", "-") and peek():
        op = peek()
        pos += 1
        value = value + term() if op == "+" else value - term()
    return value


def term():
    global pos
    value = factor()
    while peek() == "*":
        pos += 1
        value *= factor()
    return value


def factor():
    global pos
    if peek() == "-":
        pos += 1
        return -factor()
    if peek() == "(":
        pos += 1
        value = expression()
        pos += 1  # the closing parenthesis
        return value
    start = pos
    while peek().isdigit():
        pos += 1
    return int(text[start:pos])


print(expression())
""",
    "recursive descent: expression of terms, term of factors, factor is number, unary minus or group",
)
_stdin(
    "parsing-transpose", 3, "Transpose a Table",
    "The first line holds r and c; r lines of c integers follow. Print the c x r transposed table, "
    "one row per line, numbers separated by spaces.",
    [("2 3\n1 2 3\n4 5 6\n", "1 4\n2 5\n3 6\n"), ("1 1\n9\n", "9\n"), ("3 1\n1\n2\n3\n", "1 2 3\n")],
    """
r, c = map(int, input().split())
rows = [input().split() for _ in range(r)]
for column in zip(*rows):
    print(" ".join(column))
""",
    "read the rows and print zip(*rows) one column per line",
)

# ---------------------------------------------------------------------------------------------
# grids and simulation
# ---------------------------------------------------------------------------------------------
_functional(
    "grids-robot-walk", 1, "Robot Walk",
    "A robot starts at (0, 0). `moves` is a string of U, D, L, R (y+1, y-1, x-1, x+1). Return its "
    "final position as `[x, y]`.",
    "final_position", "moves",
    [(["UURDL"], [0, 1]), ([""], [0, 0]), (["RRRR"], [4, 0]), (["LDLD"], [-2, -2])],
    """
class Solution:
    def final_position(self, moves):
        x = moves.count("R") - moves.count("L")
        y = moves.count("U") - moves.count("D")
        return [x, y]
""",
    "x is the count of R minus L, y the count of U minus D",
)
_stdin(
    "grids-count-walls", 1, "Count Walls",
    "The first line holds r and c; r lines of c characters follow, each `#` or `.`. Print the number "
    "of `#` characters.",
    [("2 3\n#.#\n.##\n", "4\n"), ("1 1\n.\n", "0\n"), ("2 2\n##\n##\n", "4\n")],
    """
r, c = map(int, input().split())
print(sum(input().count("#") for _ in range(r)))
""",
    "read the r rows and add up their '#' counts",
)
_functional(
    "grids-islands", 2, "Count Islands",
    "`grid` is a list of equal-length strings of `0` and `1`. Return the number of islands: groups "
    "of `1` cells connected horizontally or vertically.",
    "count_islands", "grid",
    [([["110", "010", "001"]], 2), ([["000"]], 0), ([["1"]], 1), ([["101", "010", "101"]], 5)],
    """
class Solution:
    def count_islands(self, grid):
        rows, cols = len(grid), len(grid[0]) if grid else 0
        seen = set()
        islands = 0
        for r in range(rows):
            for c in range(cols):
                if grid[r][c] == "1" and (r, c) not in seen:
                    islands += 1
                    stack = [(r, c)]
                    seen.add((r, c))
                    while stack:
                        y, x = stack.pop()
                        for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                            if 0 <= ny < rows and 0 <= nx < cols and grid[ny][nx] == "1" and (ny, nx) not in seen:
                                seen.add((ny, nx))
                                stack.append((ny, nx))
        return islands
""",
    "flood-fill each unseen land cell with a stack and count the fills",
)
_stdin(
    "grids-life-step", 2, "One Generation of Life",
    "The first line holds r and c; r lines of `#` (alive) and `.` (dead) follow. Print the grid after "
    "one step of Conway's Game of Life (cells outside the grid are dead): a live cell with 2 or 3 live "
    "neighbours (of 8) survives, a dead cell with exactly 3 becomes alive, all others are dead.",
    [("3 3\n...\n###\n...\n", ".#.\n.#.\n.#.\n"), ("2 2\n##\n##\n", "##\n##\n"), ("1 1\n#\n", ".\n")],
    """
r, c = map(int, input().split())
grid = [input() for _ in range(r)]
for y in range(r):
    row = []
    for x in range(c):
        alive = sum(
            grid[y + dy][x + dx] == "#"
            for dy in (-1, 0, 1)
            for dx in (-1, 0, 1)
            if (dy or dx) and 0 <= y + dy < r and 0 <= x + dx < c
        )
        keep = alive in (2, 3) if grid[y][x] == "#" else alive == 3
        row.append("#" if keep else ".")
    print("".join(row))
""",
    "count the 8 neighbours of every cell and apply the survive/birth rule",
)
_stdin(
    "grids-shortest-path", 3, "Shortest Path in a Maze",
    "The first line holds r and c; r lines follow with `S` (start), `E` (exit), `#` (wall) and `.` "
    "(free). Moving up, down, left or right costs one step. Print the fewest steps from S to E, or -1 "
    "if E cannot be reached.",
    [("3 3\nS..\n.#.\n..E\n", "4\n"), ("1 3\nS#E\n", "-1\n"), ("1 2\nSE\n", "1\n")],
    """
from collections import deque

r, c = map(int, input().split())
grid = [input() for _ in range(r)]
start = next((y, x) for y in range(r) for x in range(c) if grid[y][x] == "S")
distance = {start: 0}
queue = deque([start])
answer = -1
while queue:
    y, x = queue.popleft()
    if grid[y][x] == "E":
        answer = distance[(y, x)]
        break
    for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
        if 0 <= ny < r and 0 <= nx < c and grid[ny][nx] != "#" and (ny, nx) not in distance:
            distance[(ny, nx)] = distance[(y, x)] + 1
            queue.append((ny, nx))
print(answer)
""",
    "breadth-first search from S; the first time E is popped gives the distance",
)
_functional(
    "grids-spiral", 3, "Spiral Order",
    "Return the elements of the non-empty rectangular `matrix` in clockwise spiral order starting "
    "at the top-left corner.",
    "spiral_order", "matrix",
    [
        ([[[1, 2, 3], [4, 5, 6], [7, 8, 9]]], [1, 2, 3, 6, 9, 8, 7, 4, 5]),
        ([[[1, 2], [3, 4]]], [1, 2, 4, 3]),
        ([[[1]]], [1]),
        ([[[1, 2, 3, 4]]], [1, 2, 3, 4]),
        ([[[1], [2], [3]]], [1, 2, 3]),
    ],
    """
class Solution:
    def spiral_order(self, matrix):
        top, bottom, left, right = 0, len(matrix) - 1, 0, len(matrix[0]) - 1
        out = []
        while top <= bottom and left <= right:
            out += [matrix[top][x] for x in range(left, right + 1)]
            out += [matrix[y][right] for y in range(top + 1, bottom + 1)]
            if top < bottom:
                out += [matrix[bottom][x] for x in range(right - 1, left - 1, -1)]
            if left < right:
                out += [matrix[y][left] for y in range(bottom - 1, top, -1)]
            top, bottom, left, right = top + 1, bottom - 1, left + 1, right - 1
        return out
""",
    "peel the outer ring (top row, right column, bottom row, left column) and shrink the bounds",
)
