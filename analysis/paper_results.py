"""The paper's result tables (OILCA, NeurIPS 2023: Tables 1, 2, 4, 6 and 7) as plain data, keyed by our task and
method names. Every cell is (mean, s) as printed: the average episode return over five random seeds, then the number the
paper prints after ±. Nothing here is computed; report.py --paper-table puts our numbers beside these.

Where each number comes from (the paper's LaTeX labels; row order and column order as printed):
- TABLE_1  Table 1 (`tab:dmc`, §5.3 "In-distribution Performance (Q2)"): DeepMind Control, in-distribution, 9 tasks ×
           BC-exp, BC-all, ORIL, BCND, LobsDICE, DWBC, OILCA; episodes of 1,000 steps.
- TABLE_2  Table 2 (`tab:cw`, §5.4 "Out-of-distribution Generalization (Q3)"): CausalWorld, trained on space A and
           tested on space B, 9 tasks × the same 7 methods.
- TABLE_6  Table 6 (`tab:cwaa`, Appendix "In-distribution Experiments on CausalWorld"): CausalWorld, trained and tested
           on space A, 9 tasks × the same 7 methods.
- TABLE_4  Table 4 (`tab:dmcw`, Appendix "Combinations with Other Base Offline IL Methods"): ORIL, ORIL+CA, BCND,
           BCND+CA, DWBC, OILCA on cartpole-swingup, cheetah-run, finger-turn_hard, fish-swim (DeepMind Control, as
           Table 1) and reaching, pushing, picking, pick_and_place (CausalWorld, space B, as Table 2).
- TABLE_7  Table 7 (`tab:c_change`, Appendix "Performance of changing the auxiliary variable c"): OILCA on the 9
           CausalWorld tasks (space B) with the intervened feature sets C = 1…5 (FEATURE_SETS); C = 3 is the feature set
           of Tables 2 and 6.

The numbers are copied digit for digit; the paper prints two decimals everywhere except Table 6's LobsDICE on
stacking2, printed `378.3`. Where the paper disagrees with itself, each table keeps its own value; MISMATCHES lists
the cells where Table 4 or Table 7 repeat a cell of Table 1 or 2 with another number, and ODDITIES what else looks like
a copying slip (repeated numbers), kept as printed.
"""

DMC_TASKS = ("cartpole-swingup", "cheetah-run", "finger-turn_hard", "fish-swim", "humanoid-run",
             "manipulator-insert_ball", "manipulator-insert_peg", "walker-stand", "walker-walk")  # Table 1's rows
CW_TASKS = ("reaching", "pushing", "picking", "pick_and_place", "stacking2", "towers", "stacked_blocks",
            "creative_stacked_blocks", "general")  # Tables 2, 6 and 7's rows
METHODS = ("bc_exp", "bc_all", "oril", "bcnd", "lobsdice", "dwbc", "oilca")  # Tables 1, 2 and 6's columns
CA_METHODS = ("oril", "oril_ca", "bcnd", "bcnd_ca", "dwbc", "oilca")  # Table 4's columns
C_VALUES = (1, 2, 3, 4, 5)  # Table 7's columns: the number of intervened features
DEFAULT_C = 3  # the feature set of Tables 2 and 6 (and cw_env.py's default)
FEATURE_SETS = {1: ("stage_friction",), 2: ("stage_friction", "floor_friction"),
                3: ("stage_color", "stage_friction", "floor_friction"),
                4: ("stage_color", "stage_friction", "floor_friction", "block_mass"),
                5: ("stage_color", "stage_friction", "floor_friction", "block_color", "block_mass")}  # Table 7's text

# One row per task: one (mean, s) per column, in the column order above.
TABLE_1 = {  # Table 1 (tab:dmc), columns METHODS
    "cartpole-swingup": ((195.44, 7.39), (269.03, 7.06), (221.24, 14.49), (243.52, 11.33), (292.96, 11.05),
                         (382.55, 8.95), (608.38, 35.54)),
    "cheetah-run": ((66.59, 11.09), (90.01, 31.74), (45.08, 9.88), (96.06, 16.15), (74.53, 7.75), (66.87, 4.60),
                    (116.05, 14.65)),
    "finger-turn_hard": ((129.20, 4.51), (104.56, 8.32), (185.57, 26.75), (204.67, 13.18), (190.93, 12.19),
                         (243.47, 17.12), (298.73, 5.11)),
    "fish-swim": ((74.59, 11.73), (68.87, 11.93), (84.90, 1.96), (153.28, 19.29), (188.84, 11.28), (212.39, 7.62),
                  (290.28, 10.07)),
    "humanoid-run": ((77.59, 8.63), (138.93, 9.14), (96.88, 10.76), (257.01, 11.21), (120.87, 10.66),
                     (302.33, 14.53), (460.96, 17.55)),
    "manipulator-insert_ball": ((91.61, 7.49), (98.59, 1.62), (98.25, 2.68), (141.71, 15.30), (197.79, 1.98),
                                (107.86, 15.01), (296.83, 3.43)),
    "manipulator-insert_peg": ((92.02, 15.04), (119.63, 6.37), (105.86, 5.10), (220.66, 15.14), (299.19, 3.40),
                               (238.39, 19.76), (305.66, 4.91)),
    "walker-stand": ((169.14, 8.00), (192.14, 37.91), (181.23, 10.31), (279.66, 12.69), (252.34, 7.73),
                     (280.07, 5.79), (395.51, 8.05)),
    "walker-walk": ((29.44, 2.18), (75.79, 6.34), (41.43, 4.05), (157.44, 9.31), (102.14, 5.94), (166.95, 10.68),
                    (377.19, 15.87)),
}
TABLE_2 = {  # Table 2 (tab:cw), columns METHODS
    "reaching": ((281.18, 16.45), (176.54, 9.75), (339.40, 12.98), (228.33, 7.14), (243.29, 9.84), (479.92, 18.75),
                 (976.60, 20.13)),
    "pushing": ((256.64, 12.70), (235.58, 10.23), (283.91, 19.72), (191.23, 12.64), (206.44, 15.35), (298.09, 14.94),
                (405.08, 24.03)),
    "picking": ((270.01, 13.13), (258.54, 16.53), (388.15, 19.21), (221.89, 7.68), (337.78, 12.09), (366.26, 8.77),
                (491.09, 6.44)),
    "pick_and_place": ((294.06, 7.34), (225.42, 12.44), (270.75, 14.87), (259.12, 8.01), (266.09, 10.31),
                       (349.66, 7.39), (490.24, 11.69)),
    "stacking2": ((496.63, 7.68), (394.91, 16.98), (388.55, 10.93), (339.18, 9.46), (362.47, 17.05), (481.07, 10.11),
                  (831.82, 11.78)),
    "towers": ((667.81, 9.27), (784.88, 17.17), (655.96, 15.14), (139.30, 18.22), (535.74, 13.76), (768.68, 24.77),
               (994.82, 5.76)),
    "stacked_blocks": ((581.91, 26.92), (452.88, 18.78), (702.15, 15.30), (341.97, 33.69), (250.44, 14.08),
                       (1596.96, 81.84), (2617.71, 88.07)),
    "creative_stacked_blocks": ((496.32, 26.92), (529.82, 31.01), (882.27, 46.79), (288.55, 19.63), (317.95, 32.03),
                                (700.23, 13.71), (1348.49, 55.05)),
    "general": ((492.78, 17.64), (547.32, 8.49), (647.95, 24.39), (195.06, 9.80), (458.27, 18.69), (585.98, 19.25),
                (891.14, 23.12)),
}
TABLE_6 = {  # Table 6 (tab:cwaa), columns METHODS
    "reaching": ((353.98, 11.48), (247.60, 15.99), (372.39, 9.58), (358.36, 15.45), (323.43, 10.13), (530.96, 8.70),
                 (986.19, 10.27)),
    "pushing": ((331.32, 6.36), (310.62, 9.21), (364.37, 8.36), (335.87, 9.02), (275.38, 9.93), (436.22, 5.39),
                (579.55, 12.64)),
    "picking": ((394.63, 12.98), (360.28, 8.98), (427.39, 13.69), (381.45, 8.63), (326.97, 12.31), (479.05, 8.57),
                (648.34, 8.51)),
    "pick_and_place": ((453.59, 7.58), (355.83, 8.47), (348.34, 11.63), (376.34, 9.87), (287.81, 10.06),
                       (448.89, 12.49), (588.87, 9.29)),
    "stacking2": ((596.14, 15.76), (435.12, 12.81), (467.11, 13.19), (476.33, 5.21), (378.3, 7.65), (631.75, 8.54),
                  (920.18, 7.36)),
    "towers": ((723.49, 15.82), (947.96, 17.56), (679.93, 8.68), (680.61, 8.57), (735.79, 12.23), (915.26, 17.97),
               (1263.94, 8.98)),
    "stacked_blocks": ((1320.97, 19.83), (947.96, 25.45), (1520.62, 31.62), (1247.96, 29.14), (958.64, 26.56),
                       (2116.51, 32.97), (3210.23, 43.63)),
    "creative_stacked_blocks": ((684.52, 16.69), (593.41, 26.86), (758.04, 12.70), (933.88, 16.57), (601.18, 19.42),
                                (870.29, 24.56), (1476.41, 25.94)),
    "general": ((626.15, 20.57), (691.37, 17.22), (1072.05, 47.26), (572.70, 11.28), (549.89, 15.31),
                (786.44, 18.52), (964.32, 17.08)),
}
TABLE_4 = {  # Table 4 (tab:dmcw), columns CA_METHODS
    "cartpole-swingup": ((221.24, 14.49), (426.79, 12.09), (243.52, 11.33), (452.68, 12.86), (382.55, 8.95),
                         (608.38, 35.54)),
    "cheetah-run": ((45.08, 9.88), (78.44, 6.95), (96.06, 16.15), (158.62, 8.85), (66.87, 4.60), (116.05, 14.65)),
    "finger-turn_hard": ((185.57, 26.75), (227.94, 15.47), (204.67, 13.18), (284.29, 12.03), (243.47, 17.12),
                         (298.73, 5.11)),
    "fish-swim": ((84.90, 1.96), (156.92, 8.18), (153.28, 19.29), (268.56, 6.03), (212.39, 7.62), (290.29, 10.07)),
    "reaching": ((339.40, 12.98), (652.21, 7.05), (228.33, 7.14), (582.44, 9.07), (479.92, 18.75), (976.60, 20.13)),
    "pushing": ((283.91, 19.72), (367.46, 6.31), (191.23, 12.64), (320.94, 10.37), (298.09, 14.94), (405.08, 24.03)),
    "picking": ((388.15, 19.21), (458.03, 13.95), (221.89, 7.68), (486.32, 8.03), (366.26, 8.77), (491.09, 6.44)),
    "pick_and_place": ((270.75, 14.87), (372.18, 10.74), (259.12, 8.01), (393.59, 7.81), (349.66, 7.39),
                       (490.24, 11.69)),
}
TABLE_7 = {  # Table 7 (tab:c_change), columns C_VALUES
    "reaching": ((928.62, 22.38), (957.54, 18.39), (976.60, 20.13), (985.25, 17.26), (1037.12, 19.15)),
    "pushing": ((389.16, 9.43), (396.52, 17.29), (405.08, 24.03), (426.60, 15.37), (429.42, 12.28)),
    "picking": ((462.54, 9.08), (484.21, 11.37), (491.09, 6.44), (522.96, 13.27), (525.20, 12.28)),
    "pick_and_place": ((464.68, 10.27), (486.74, 8.52), (490.24, 11.69), (511.76, 9.05), (523.46, 15.42)),
    "stacking2": ((794.81, 16.50), (803.27, 13.26), (831.82, 11.78), (867.43, 9.82), (871.43, 18.19)),
    "towers": ((972.34, 12.36), (979.23, 8.72), (994.82, 5.76), (1027.16, 17.25), (1029.37, 8.06)),
    "stacked_blocks": ((2317.48, 74.32), (2558.35, 42.17), (2617.71, 88.07), (2682.76, 69.25), (2754.39, 82.16)),
    "creative_stacked_blocks": ((1226.72, 62.18), (1297.20, 39.42), (1348.49, 55.05), (1468.65, 27.63),
                                (1486.51, 41.29)),
    "general": ((868.62, 7.65), (875.55, 19.28), (891.14, 23.12), (926.19, 17.34), (934.74, 16.20)),
}

MISMATCHES = {
    (4, "fish-swim", "oilca"): "Table 4 prints OILCA on fish-swim as 290.29 ± 10.07, Table 1 as 290.28 ± 10.07",
}
"""(table, task, column) → what differs, for cells that Table 4 or 7 repeat from Table 1 or 2 with another number"""
ODDITIES = {
    2: ("BC-exp has the same s, 26.92, on stacked_blocks and creative_stacked_blocks",),
    6: ("BC-all has the same mean, 947.96, on towers and stacked_blocks",
        "LobsDICE on stacking2 is printed with one decimal (378.3)"),
    7: ("C = 5 has the same s, 12.28, on pushing and picking",),
}
"""per table: repeated numbers that may be copying slips, kept as printed"""

TABLES = {
    1: {"label": "tab:dmc", "title": "Table 1: DeepMind Control, in-distribution", "columns": METHODS,
        "rows": TABLE_1, "splits": {"dmc": "train"}},
    2: {"label": "tab:cw", "title": "Table 2: CausalWorld, trained on space A, tested on space B (out-of-distribution)",
        "columns": METHODS, "rows": TABLE_2, "splits": {"cw": "B"}},
    4: {"label": "tab:dmcw", "title": "Table 4: each base method with and without counterfactual augmentation (CA); "
        "DeepMind Control in-distribution, CausalWorld space B", "columns": CA_METHODS, "rows": TABLE_4,
        "splits": {"dmc": "train", "cw": "B"}},
    6: {"label": "tab:cwaa", "title": "Table 6: CausalWorld, trained and tested on space A (in-distribution)",
        "columns": METHODS, "rows": TABLE_6, "splits": {"cw": "A"}},
    7: {"label": "tab:c_change", "title": "Table 7: OILCA with C = 1…5 intervened features, CausalWorld space B",
        "columns": C_VALUES, "rows": TABLE_7, "splits": {"cw": "B"}},
}
"""number → label, title, columns (method ids, or Table 7's C values), rows ({task: ((mean, s), …)} in column order)
and splits (the evaluation split of each benchmark's rows: `train` for DeepMind Control, space `A` or `B` for
CausalWorld)"""


def benchmark(task: str) -> str:
    """`dmc` for a DeepMind Control task of Table 1, `cw` for a CausalWorld task of Table 2."""
    if task in DMC_TASKS:
        return "dmc"
    if task in CW_TASKS:
        return "cw"
    raise KeyError(f"{task!r} is not a task of the paper's tables")


def cells(number: int) -> dict:
    """{task: {column: (mean, s)}} of paper table `number` (1, 2, 4, 6 or 7), rows in the paper's order."""
    t = TABLES[number]
    return {task: dict(zip(t["columns"], row)) for task, row in t["rows"].items()}
